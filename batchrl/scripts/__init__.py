"""The command lines: `train` and `visualize`, thin `main()`s over library functions.

Each parses its arguments, hides TensorFlow's start-up lines (`quiet.py`) and calls into
`batchrl.runners.train` or `batchrl.training.video`; nothing else imports from here.
"""
