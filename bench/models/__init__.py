"""Real-model benches (issue 13): each module builds one model in tinycore's nn and the same in torch from the same
weights, checks the first step's loss against torch's and times tinycore (TinyJit) against torch eager and
torch.compile on one thread. bench/bench.py runs them as the groups named in MODELS; each module also runs alone:
`python -m bench.models.<module> --memory tinycore|torch STEPS` (the memory of a training loop)."""
MODELS = {"resnet18": "resnet", "gpt": "gpt", "digits": "digits"}  # bench.py group -> module
