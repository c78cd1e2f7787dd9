"""What a training run leaves on disk and how it is read back: checkpoints (and their earlier
formats), the final and best checkpoints' names, the run directory's lock, crash-safe file
writes, and the ONNX export with its torch-free runner.
"""
