"""Facts of the real Cosmos 3 stack (diffusers, vLLM-Omni, the framework), in one home for the clients, the stand-ins
and the spec loader; ``tests/contracts`` checks them against fixtures generated from the real packages."""
