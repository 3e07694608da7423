"""Stand-ins for the modules vLLM's KV cache manager imports but does not
need to run on a host without torch: torch itself, vLLM's config, logger,
envs, KV events, metrics, Request, and a few utilities. Each stub offers
only what the manager's code paths under this trace touch. install(root)
registers them in sys.modules and makes root/vllm the vllm package, so the
real files under root (block_pool.py, kv_cache_utils.py,
single_type_kv_cache_manager.py, kv_cache_manager.py,
kv_cache_coordinator.py, kv_cache_metrics.py, kv_cache_interface.py,
utils/hashing.py, utils/math_utils.py) import unchanged."""

import enum
import logging
import os
import sys
import types
import typing
from dataclasses import dataclass, field


def _module(name, path=None, **attrs):
    m = types.ModuleType(name)
    if path is not None:
        m.__path__ = [path]
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


class _DType:
    def __init__(self, name, size):
        self.name, self.itemsize = name, size

    def __repr__(self):
        return "torch." + self.name


class Request:
    """vllm.v1.request.Request, reduced to what the KV cache manager reads:
    token ids, computed tokens, and block hashes kept current by the block
    hasher as the real Request does (update_block_hashes on creation and
    on every append_output_token_ids)."""

    def __init__(self, request_id, prompt_token_ids, block_hasher):
        self.request_id = request_id
        self._all_token_ids = list(prompt_token_ids)
        self.all_token_ids = self._all_token_ids
        self.num_prompt_tokens = len(prompt_token_ids)
        self.num_computed_tokens = 0
        self.mm_features = []
        self.lora_request = None
        self.cache_salt = None
        self.prompt_embeds = None
        self._prompt_embeds_per_block_hashes = {}
        self.num_preemptions = 0
        self.skip_reading_prefix_cache = False
        self.spec_token_ids = []
        self.block_hashes = []
        self._block_hasher = block_hasher
        self.update_block_hashes()

    def append_output_token_ids(self, token_ids):
        if isinstance(token_ids, int):
            self._all_token_ids.append(token_ids)
        else:
            self._all_token_ids.extend(token_ids)
        self.update_block_hashes()

    def update_block_hashes(self):
        self.block_hashes.extend(self._block_hasher(self))

    @property
    def num_tokens(self):
        return len(self._all_token_ids)

    @property
    def num_tokens_with_spec(self):
        return len(self._all_token_ids) + len(self.spec_token_ids)


@dataclass
class PrefixCacheStats:
    """vllm.v1.metrics.stats.PrefixCacheStats: the counters record() adds."""

    reset: bool = False
    requests: int = 0
    queries: int = 0
    hits: int = 0
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0

    def record(self, num_tokens, num_hits, preempted):
        if preempted:
            self.preempted_requests += 1
            self.preempted_queries += num_tokens
            self.preempted_hits += num_hits
        else:
            self.requests += 1
            self.queries += num_tokens
            self.hits += num_hits


class _Event:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def install(root):
    root = os.path.abspath(root)
    pkg = lambda *p: os.path.join(root, "vllm", *p)
    dtypes = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1, "float8_e4m3fn": 1}
    torch = _module("torch", Tensor=object, dtype=_DType,
                    **{n: _DType(n, s) for n, s in dtypes.items()})
    torch.__getattr__ = lambda name: _DType(name, 2)
    _module("typing_extensions", Self=typing.Self)
    _module("cbor2", dumps=lambda *a, **k: (_ for _ in ()).throw(RuntimeError("cbor2 stub")))

    _module("vllm", path=pkg())
    envs = _module("vllm.envs", VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=False)
    envs.__getattr__ = lambda name: None
    sys.modules["vllm"].envs = envs
    _module("vllm.logger", init_logger=logging.getLogger)
    _module("vllm.config", VllmConfig=object)
    _module("vllm.distributed", path=pkg("distributed"))
    _module("vllm.distributed.kv_events", MEDIUM_GPU="GPU", AllBlocksCleared=_Event,
            BlockRemoved=_Event, BlockStored=_Event, KVCacheEvent=_Event)
    _module("vllm.utils", path=pkg("utils"))
    _module("vllm.utils.mem_utils", format_gib=lambda b: f"{b / (1 << 30):.2f}")
    _module("vllm.utils.torch_utils", get_dtype_size=lambda d: d.itemsize,
            nvfp4_kv_cache_full_dim=lambda d: d)
    _module("vllm.v1", path=pkg("v1"))
    _module("vllm.v1.core", path=pkg("v1", "core"))
    _module("vllm.v1.utils", tensor_data=lambda t: t)
    _module("vllm.v1.request", Request=Request)
    _module("vllm.v1.metrics", path=pkg("v1", "metrics"))
    _module("vllm.v1.metrics.stats", PrefixCacheStats=PrefixCacheStats,
            KVCacheEvictionEvent=_Event)
    _module("vllm.v1.attention", path=pkg("v1", "attention"))
    _module("vllm.v1.attention.backends", path=pkg("v1", "attention", "backends"))
    _module("vllm.v1.attention.backends.registry",
            MambaAttentionBackendEnum=enum.Enum("MambaAttentionBackendEnum", "MAMBA1 MAMBA2 SHORT_CONV LINEAR GDN_ATTN"))
