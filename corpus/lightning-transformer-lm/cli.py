"""The lines a LightningCLI user writes: model, data and trainer all come from the YAML given with
--config (class paths into the installed lightning package). No config is saved back beside it."""

from lightning.pytorch.cli import LightningCLI

if __name__ == "__main__":
    LightningCLI(save_config_callback=None)
