"""MLServer's XGBoost runtime, with a load failure recorded as the container's termination
message (`failure`), so that `serve` exits 1 saying why instead of MLServer's plain stop, and
with the model's V2 metadata filled in from the booster (MLServer's lists no tensors).

Requests and responses are the runtime's own: one FP32 input [N, features]; the output
`predict` by default (for a booster saved by `xgboost.train`, such as the digits example's
multi:softprob one, its predictions: the probabilities [N, classes]). GET /v2/models/NAME says
so: the input `input-0` of [-1, features], the output `predict` of [-1, classes] (or [-1] for
a booster of one output), unless the model's settings list tensors of their own. A request
whose rows are not of the booster's features is answered 400, saying the shape it takes
(MLServer's runtime lets XGBoost's error through as a bare 500).
"""

import json

import mlserver_xgboost
from mlserver.errors import InferenceError
from mlserver.types import InferenceRequest, InferenceResponse, MetadataTensor

from mlkube_serving.failure import cause, record


class XGBoostModel(mlserver_xgboost.XGBoostModel):
    async def load(self) -> bool:
        try:
            loaded = await super().load()
        except Exception as error:
            record(
                f"the XGBoost model of {self.name} version {self.version} did not load from"
                f" {self.settings.parameters.uri}: {cause(error)}; check that the version's model path"
                " holds an XGBoost model (model.json, model.ubj or model.bst)"
            )
            raise
        self.describe()
        return loaded

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        self.check_shapes(payload)
        return await super().predict(payload)

    def check_shapes(self, payload: InferenceRequest):
        """Each input must be rows of the booster's features: [N, features]."""
        features = self._model.get_booster().num_features()
        for tensor in payload.inputs:
            shape = list(tensor.shape)
            if len(shape) != 2 or shape[1] != features:
                raise InferenceError(
                    f"{self.name} takes FP32 rows of {features} features, the shape [N, {features}];"
                    f" the request's input {tensor.name} has the shape {shape}"
                )

    def describe(self):
        """The metadata's tensors from the booster: its features, and its classes."""
        booster = self._model.get_booster()
        if not self.inputs:
            self.inputs = [
                MetadataTensor(name="input-0", datatype="FP32", shape=[-1, booster.num_features()])
            ]
        if not self.outputs:
            learner = json.loads(booster.save_config())["learner"]["learner_model_param"]
            classes = int(learner.get("num_class", "0"))
            shape = [-1, classes] if classes > 1 else [-1]
            self.outputs = [MetadataTensor(name="predict", datatype="FP32", shape=shape)]
