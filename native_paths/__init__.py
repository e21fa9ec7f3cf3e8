"""C twins of the scheduler, sampler and KV allocator, loaded with cffi, behind the engine protocols."""
