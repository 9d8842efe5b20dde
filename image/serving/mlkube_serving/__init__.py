"""mlkube's model serving, as the serving image runs it: fetch a model's files from the object
store (`python3 -m mlkube_serving.fetch`), then serve them over the V2 inference protocol with
MLServer (`python3 -m mlkube_serving.serve`). Each module's docstring says what it takes.

A failure a user can fix ends the process with exit status 1 and one line saying what to fix,
on stderr and in the container's termination message (`failure`).
"""
