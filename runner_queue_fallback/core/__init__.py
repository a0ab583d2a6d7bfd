"""The shared core: inputs, profiles, errors, the Clock, GitHub Actions I/O, timings."""
