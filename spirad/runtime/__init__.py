"""The runtime layer (architecture §1): process state, the launch path, the sizing cache, the
Ctrl-C guard, kernel assertions, the program hooks, the logger. It sits below the backends and
the user's data types; a launch gets compiled programs and argument arrays from the layers above."""
