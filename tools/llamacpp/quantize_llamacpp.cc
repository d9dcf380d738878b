// llama.cpp's quantizer (llama-quantize's library call, llama_model_quantize) for
// tools/bench-llamacpp.sh: files in llama.cpp's own k-quant mixes, byte for byte what
// llama-quantize writes, so that both engines run the files people download. Built by that script
// against the llama.cpp library node-llama-cpp builds; not part of llm42's build.
//
//   quantize_llamacpp IN.gguf OUT.gguf TYPE      TYPE: Q4_K_M, Q5_K_M, Q6_K, IQ4_XS, Q4_K_S, Q3_K_M, Q2_K
#include <cstdio>
#include <cstring>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: quantize_llamacpp IN.gguf OUT.gguf TYPE\n");
    return 2;
  }
  struct Named {
    const char* name;
    llama_ftype type;
  };
  const Named kTypes[] = {{"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M},
                          {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},     {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS},
                          {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S}, {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M},
                          {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K}};
  llama_model_quantize_params params = llama_model_quantize_default_params();
  bool known = false;
  for (const Named& t : kTypes) {
    if (std::strcmp(argv[3], t.name) == 0) {
      params.ftype = t.type;
      known = true;
    }
  }
  if (!known) {
    std::fprintf(stderr, "quantize_llamacpp: unknown type %s\n", argv[3]);
    return 2;
  }
  llama_backend_init();
  return llama_model_quantize(argv[1], argv[2], &params) == 0 ? 0 : 1;
}
