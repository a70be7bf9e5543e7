"""Shared kernel: records and on-disk format, the model layer, images, and the interfaces
environments implement. Imports nothing else of the project."""
