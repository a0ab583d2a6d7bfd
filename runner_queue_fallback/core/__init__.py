"""The shared core: inputs, profiles, errors, the Clock, GitHub Actions I/O, timings and the like.

Also the outcome words, the API versions and the composition root's signature, which places above
read; it imports nothing above it.
"""
