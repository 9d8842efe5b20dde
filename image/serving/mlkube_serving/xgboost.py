"""MLServer's XGBoost runtime, with a load failure recorded as the container's termination
message (`failure`), so that `serve` exits 1 saying why instead of MLServer's plain stop.

Requests and responses are the runtime's own: one FP32 input [N, features]; the output
`predict` by default (for a booster saved by `xgboost.train`, such as the digits example's
multi:softprob one, its predictions: the probabilities [N, classes]).
"""

import mlserver_xgboost

from mlkube_serving.failure import cause, record


class XGBoostModel(mlserver_xgboost.XGBoostModel):
    async def load(self) -> bool:
        try:
            return await super().load()
        except Exception as error:
            record(
                f"the XGBoost model of {self.name} version {self.version} did not load from"
                f" {self.settings.parameters.uri}: {cause(error)}; check that the version's model path"
                " holds an XGBoost model (model.json, model.ubj or model.bst)"
            )
            raise
