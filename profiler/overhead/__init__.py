"""What profiling costs: collectors' self-measured costs, whole-run A/B and the in-run ABBA toggle."""
