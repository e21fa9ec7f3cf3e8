"""Load scenarios as data, and the load generator that turns them into timed request specs."""
