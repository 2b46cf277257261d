"""Export the scikit-learn model to one ONNX graph with two inputs.

`text` (string [N,1]) goes through the two TF-IDF stages converted by skl2onnx (with
`locale: "C"`, the only locale this machine has); `numeric` (float [N,F]) is split in
the graph into the structural columns (scaled) and the static MiniLM vector (cosine to each
tier's centroid, scaled); then concatenation, the logistic-regression affine map and softmax
give `probs` [N,4]. Writing the tail by hand keeps the graph small and its inputs explicit.
"""
from __future__ import annotations

import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .training import SIM_SCALE, SklearnModel

TARGET_OPSET = {"": 17, "ai.onnx.ml": 3}


def _tfidf_graph(vectorizer, prefix: str) -> onnx.ModelProto:
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import StringTensorType

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # skl2onnx warns that char analyzers "may not work"; tests check parity
        model = convert_sklearn(vectorizer, initial_types=[("text", StringTensorType([None, 1]))],
                                options={id(vectorizer): {"locale": "C"}}, target_opset=TARGET_OPSET)
    return onnx.compose.add_prefix(model, prefix)


NORM_EPS = "l2_norm_eps"


def fast_l2_normalizers(nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """ai.onnx.ml Normalizer(L2) -> ReduceL2, Max(eps), Div: same values (zero rows stay zero),
    several times faster on a wide TF-IDF row (docs/routing.md). Needs the initializer NORM_EPS
    in the graph."""
    out = []
    for node in nodes:
        if node.op_type != "Normalizer":
            out.append(node)
            continue
        norm = {a.name: a.s for a in node.attribute}.get("norm", b"MAX")
        if norm != b"L2":
            raise ValueError(f"{node.name}: only L2 normalizers are rewritten, got {norm!r}")
        x, y = node.input[0], node.output[0]
        out += [helper.make_node("ReduceL2", [x], [y + "_norm"], axes=[1], keepdims=1),
                helper.make_node("Max", [y + "_norm", NORM_EPS], [y + "_safe_norm"]),
                helper.make_node("Div", [x, y + "_safe_norm"], [y])]
    return out


def to_onnx(model: SklearnModel, n_numeric: int) -> onnx.ModelProto:
    word, char = _tfidf_graph(model.word, "w_"), _tfidf_graph(model.char, "c_")
    coef = model.clf.coef_.astype(np.float32)  # [classes, features]
    if coef.shape[0] != 4:
        raise ValueError(f"expected a 4-class model, got {coef.shape[0]} classes")
    n_structural, dims = model.scaler.mean_.shape[0], model.centroids.shape[1]
    if n_structural + dims != n_numeric:
        raise ValueError(f"numeric input has {n_numeric} columns, the model reads {n_structural} + {dims}")
    inits = list(word.graph.initializer) + list(char.graph.initializer) + [
        numpy_helper.from_array(model.scaler.mean_.astype(np.float32), "num_mean"),
        numpy_helper.from_array(model.scaler.scale_.astype(np.float32), "num_scale"),
        numpy_helper.from_array(np.array([n_structural, dims], dtype=np.int64), "num_split"),
        numpy_helper.from_array(np.ascontiguousarray(model.centroids.T.astype(np.float32)), "tier_centroids"),
        numpy_helper.from_array(np.array(SIM_SCALE, dtype=np.float32), "sim_scale"),
        numpy_helper.from_array(np.ascontiguousarray(coef.T), "lr_weight"),
        numpy_helper.from_array(model.clf.intercept_.astype(np.float32), "lr_bias"),
        numpy_helper.from_array(np.array(1e-12, dtype=np.float32), NORM_EPS),
    ]
    nodes = [helper.make_node("Identity", ["text"], ["w_text"]),
             helper.make_node("Identity", ["text"], ["c_text"])]
    nodes += fast_l2_normalizers(list(word.graph.node) + list(char.graph.node))
    nodes += [
        helper.make_node("Split", ["numeric", "num_split"], ["num_structural", "num_vector"], axis=1),
        helper.make_node("Sub", ["num_structural", "num_mean"], ["num_centred"]),
        helper.make_node("Div", ["num_centred", "num_scale"], ["num_scaled"]),
        helper.make_node("MatMul", ["num_vector", "tier_centroids"], ["tier_cosine"]),
        helper.make_node("Mul", ["tier_cosine", "sim_scale"], ["tier_similarity"]),
        helper.make_node("Concat", [word.graph.output[0].name, char.graph.output[0].name, "num_scaled",
                                    "tier_similarity"], ["design"], axis=1),
        helper.make_node("MatMul", ["design", "lr_weight"], ["logits_raw"]),
        helper.make_node("Add", ["logits_raw", "lr_bias"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "tiergate_complexity",
        inputs=[helper.make_tensor_value_info("text", TensorProto.STRING, [None, 1]),
                helper.make_tensor_value_info("numeric", TensorProto.FLOAT, [None, n_numeric])],
        outputs=[helper.make_tensor_value_info("probs", TensorProto.FLOAT, [None, 4])],
        initializer=inits)
    opsets = {o.domain: o.version for m in (word, char) for o in m.opset_import}
    opsets[""] = max(opsets.get("", 0), TARGET_OPSET[""])
    out = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
                            producer_name="tiergate.classifier")
    out.ir_version = word.ir_version
    onnx.checker.check_model(out)
    return out
