"""Code that runs INSIDE the sandbox. Standard library only: this folder is copied into containers."""
