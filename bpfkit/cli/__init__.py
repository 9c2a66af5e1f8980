"""The ``bpfkit`` command. Uses only bpfkit's public API; heavy imports stay inside commands."""
