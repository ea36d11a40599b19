"""Our driver of neuralforecast (the library ships no training CLI): it reads forecast.yaml, builds
the model it names from neuralforecast.models with the YAML's arguments, and fits it on the series
make_data.py wrote, through NeuralForecast.fit (Lightning underneath). The batch settings are the
model's own arguments, in the YAML: batch_size (series per batch), windows_batch_size (windows
sampled from them per training step) and dataloader_kwargs."""

import sys
from typing import Any, Dict

import pandas as pd
import yaml
from neuralforecast import NeuralForecast
from neuralforecast import models


def main(path: str) -> None:
    with open(path, encoding="utf8") as f:
        config: Dict[str, Any] = yaml.safe_load(f)
    series = pd.read_csv(config["data"])
    model = getattr(models, config["model"])(**config["arguments"])
    forecast = NeuralForecast(models=[model], freq=config["freq"])
    forecast.fit(df=series)


if __name__ == "__main__":
    main(sys.argv[sys.argv.index("--config") + 1] if "--config" in sys.argv else "forecast.yaml")
