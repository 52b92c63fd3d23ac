"""A STAND-IN for the Cosmos Framework inference CLI (see ``__main__``): a test double, not NVIDIA's framework."""
