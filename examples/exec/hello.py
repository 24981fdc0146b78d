# `codeact exec examples/exec/hello.py`: one round in the sandbox, no model involved.
squares = [n * n for n in range(5)]
print(f"squares: {squares}")
