"""The flat Agent S3 worker: action grammar, grounding, reflection and the embedded coding
agent. A function of data and a chat model; never touches an environment directly."""
