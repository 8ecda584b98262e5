"""kerasfit: find and fix Keras/TensorFlow code that wastes accelerator matrix units."""

__version__ = "0.1.0"
