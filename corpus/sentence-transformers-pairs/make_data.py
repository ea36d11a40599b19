"""What train.py reads, made here with nothing downloaded: a tiny BERT (random init, 2 layers, 64 wide)
with a word-level tokenizer built by the `tokenizers` package, wrapped as a SentenceTransformer (BERT
then mean pooling) and saved as model/, and data/pairs.jsonl, rows of {"anchor": ..., "positive": ...}:
two sentences drawn around the same topic, the pairs an embedding model is fine-tuned on."""

import json
import os
import random
import tempfile

from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules import Transformer
from sentence_transformers.sentence_transformer.modules import Pooling
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

WORDS = ["w%d" % i for i in range(500)]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAIRS = 4000


def sentence(rng: random.Random, topic: int) -> str:
    """Words near one topic of the vocabulary, 8 to 30 of them."""
    return " ".join(WORDS[(topic + rng.randrange(12)) % len(WORDS)] for _ in range(rng.randint(8, 30)))


def main() -> None:
    rng = random.Random(0)
    os.makedirs("data", exist_ok=True)
    with open(os.path.join("data", "pairs.jsonl"), "w", encoding="utf8") as f:
        for _ in range(PAIRS):
            topic = rng.randrange(len(WORDS))
            f.write(json.dumps({"anchor": sentence(rng, topic), "positive": sentence(rng, topic)}) + "\n")

    vocab = {token: i for i, token in enumerate(SPECIAL + WORDS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]"
    )
    config = BertConfig(vocab_size=len(vocab), hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                        max_position_embeddings=128, pad_token_id=vocab["[PAD]"])
    with tempfile.TemporaryDirectory() as bert:
        BertModel(config).save_pretrained(bert)
        tokenizer.save_pretrained(bert)
        encoder = Transformer(bert, max_seq_length=64)
        SentenceTransformer(modules=[encoder, Pooling(encoder.get_embedding_dimension(), "mean")]).save("model")
    print("wrote model/ and data/pairs.jsonl (%d pairs)" % PAIRS)


if __name__ == "__main__":
    main()
