"""What `trl sft --config sft.yaml` reads, made here with nothing downloaded: a tiny Llama-shaped causal
LM (random init, 2 layers, 64 wide) with a word-level tokenizer built by the `tokenizers` package,
saved as model/ in the format from_pretrained reads, and data/train.jsonl, rows of {"text": ...}."""

import json
import os
import random

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

WORDS = ["w%d" % i for i in range(300)]
SPECIAL = ["<unk>", "<pad>", "<s>", "</s>"]

rng = random.Random(0)
os.makedirs("data", exist_ok=True)
with open(os.path.join("data", "train.jsonl"), "w", encoding="utf8") as f:
    for _ in range(2000):
        start = rng.randrange(len(WORDS))
        words = [WORDS[(start + rng.randrange(5)) % len(WORDS)] for _ in range(rng.randint(12, 60))]
        f.write(json.dumps({"text": " ".join(words)}) + "\n")

vocab = {token: i for i, token in enumerate(SPECIAL + WORDS)}
core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
core.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="</s>")
config = LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=4, max_position_embeddings=256, pad_token_id=vocab["<pad>"], bos_token_id=vocab["<s>"],
                     eos_token_id=vocab["</s>"])
LlamaForCausalLM(config).save_pretrained("model")
tokenizer.save_pretrained("model")
print("wrote model/ (%d parameters) and data/train.jsonl" % sum(p.numel() for p in LlamaForCausalLM(config).parameters()))
