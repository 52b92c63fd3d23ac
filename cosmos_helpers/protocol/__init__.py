"""Facts of the real Cosmos 3 stack, in one home: ``vllm_omni`` (the HTTP protocol), ``framework`` (input files,
defaults, command line, outputs) and ``variants`` (distilled checkpoints, Edge, image editing across all three).
The client, the local stand-in server and the spec loader all read them here; ``tests/contracts`` checks them
against fixtures generated from the real packages."""
