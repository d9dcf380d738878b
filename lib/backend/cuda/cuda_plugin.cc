// The CUDA backend as libllm42-cuda.so (LLM42_CUDA_PLUGIN): its entry point for the registry's
// loader (backend_plugin.h).
#include "lib/backend/backend_plugin_export.h"
#include "lib/backend/cuda/cuda_factory.h"

LLM42_DEFINE_BACKEND_PLUGIN((llm42::BackendEntry{"cuda", llm42::CudaUsable, llm42::CreateCudaBackend}))
