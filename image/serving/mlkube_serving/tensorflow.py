"""An MLServer runtime for TensorFlow SavedModels, which MLServer has none of (TF Serving
itself cannot be installed here): it loads the directory with tf.saved_model.load and calls its
`serving_default` signature.

A request gives the signature's inputs by name (a signature with one input takes a request with
one input whatever its name), as V2 tensors: the digits example's `pixels`, FP32 [N, 64], each
pixel of 0-16 divided by 16. Data of another numeric type is cast to the input's. The response
has the signature's outputs as V2 tensors, or only those the request names: the digits
example's `probabilities`, FP32 [N, 10]. A load failure is recorded as the container's
termination message (`failure`).
"""

import numpy as np
import tensorflow as tf
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.codecs.numpy import to_datatype
from mlserver.errors import InferenceError
from mlserver.types import InferenceRequest, InferenceResponse, MetadataTensor
from mlserver.utils import get_model_uri

from mlkube_serving.failure import cause, record

SIGNATURE = "serving_default"


def metadata(name, spec):
    """A V2 metadata tensor for a TensorSpec: -1 for a dimension of any size."""
    shape = [-1 if size is None else size for size in spec.shape.as_list()]
    datatype = to_datatype(np.dtype(spec.dtype.as_numpy_dtype))
    return MetadataTensor(name=name, datatype=datatype, shape=shape)


class TensorFlowModel(MLModel):
    async def load(self) -> bool:
        uri = await get_model_uri(self.settings)
        try:
            loaded = tf.saved_model.load(uri)
            if SIGNATURE not in loaded.signatures:
                raise ValueError(
                    f"it has no {SIGNATURE!r} signature (it has: {', '.join(loaded.signatures) or 'none'})"
                )
        except Exception as error:
            record(
                f"the TensorFlow SavedModel of {self.name} version {self.version} did not load"
                f" from {uri}: {cause(error)}; check that the version's model path holds a SavedModel"
                f" with a {SIGNATURE!r} signature"
            )
            raise
        # The loaded object owns the variables the signature reads: keep it.
        self._loaded = loaded
        self._signature = loaded.signatures[SIGNATURE]
        self._input_specs = self._signature.structured_input_signature[1]
        self._output_specs = self._signature.structured_outputs
        self.inputs = [metadata(n, s) for n, s in sorted(self._input_specs.items())]
        self.outputs = [metadata(n, s) for n, s in sorted(self._output_specs.items())]
        return True

    def _arguments(self, payload: InferenceRequest):
        """The signature's keyword arguments: each input as a tensor of its spec's type."""
        given = {i.name: i for i in payload.inputs}
        if len(self._input_specs) == 1 and len(given) == 1:
            given = {next(iter(self._input_specs)): payload.inputs[0]}
        missing = sorted(set(self._input_specs) - set(given))
        if missing:
            raise InferenceError(
                f"{self.name} takes the inputs {', '.join(sorted(self._input_specs))};"
                f" the request lacks {', '.join(missing)}"
            )
        arguments = {}
        for name, spec in self._input_specs.items():
            array = NumpyCodec.decode_input(given[name])
            if not spec.shape.is_compatible_with(array.shape):
                raise InferenceError(
                    f"input {name} of {self.name} has the shape {spec.shape.as_list()}"
                    f" (None: any size); the request's is {list(array.shape)}"
                )
            try:
                arguments[name] = tf.constant(array.astype(spec.dtype.as_numpy_dtype))
            except (TypeError, ValueError) as error:
                raise InferenceError(f"input {name} of {self.name} is {spec.dtype.name}: {error}")
        return arguments

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        wanted = [o.name for o in payload.outputs or []] or sorted(self._output_specs)
        unknown = sorted(set(wanted) - set(self._output_specs))
        if unknown:
            raise InferenceError(
                f"{self.name} has the outputs {', '.join(sorted(self._output_specs))},"
                f" not {', '.join(unknown)}"
            )
        results = self._signature(**self._arguments(payload))
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            outputs=[NumpyCodec.encode_output(name, results[name].numpy()) for name in wanted],
        )
