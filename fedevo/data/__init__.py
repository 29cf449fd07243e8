"""Data: datasets as tensors, and their partition over clients."""
