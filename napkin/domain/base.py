"""The pydantic base class of napkin's models.

``defer_build`` postpones building each model's validator until it is first used, so a command
pays only for the models it touches (startup is measured by examples/startup_benchmark.py).
"""

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    model_config = ConfigDict(defer_build=True)
