package main

import (
	"encoding/binary"
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/examples/internal/serving"
	"github.com/gpuarena/gpuarena/kernels"
)

// stepModel is the server's model: a stand-in for a transformer's forward
// pass that does real device work each step, so that the serving loop
// around it — scheduler, KV cache, arena, GPU thread — is the one a real
// engine runs. This file is where a team plugs its kernels.
//
// Each step (forward), on the GPU thread, inside a step Manager.QueueForward queued:
//  1. the batch's decode metadata goes into the arena's scratch buffer at
//     arena.DecodeMetaLayout's offsets: positions [Rows] i32 (the last
//     position each sequence computes this step), slot_mapping [Rows] i32
//     (that token's KV slot, block × kv_block_size + offset, as vLLM's
//     slot_mapping) and block_tables [Rows, Width] i32 (written by the KV
//     cache actor with the step: serving.Tables; a prompt being prefilled
//     in chunks holds the blocks of the chunks computed so far only);
//  2. the token ids the step computes ([≤ max_batch_tokens] u32: each
//     sequence's prefill chunk — its prompt past its cached prefix, or
//     the next part of a long prompt — or its last sampled token) go into
//     token_ids; a decode scheduled while the step before it ran has
//     serving.PendingToken there, and takes the token that step sampled
//     (row BatchSeq.PrevRow of its output) — a real model keeps sampled
//     ids on the device and gathers them into input_ids instead;
//  3. a stand-in embedding of each sequence's last token (a BF16 row of
//     hidden_size values that depends only on the token id and position)
//     goes into hidden_states, one row per sequence;
//  4. the RMSNorm kernel (package kernels, rmsnorm_bf16) normalises those
//     rows into norm_output with layer 0's input_layernorm weight when a
//     checkpoint is loaded (--model), else with the arena's zero-filled
//     norm_unit_w as an offset-from-1 weight (a unit weight);
//  5. the rows are read back, and the next token of each sequence is the
//     stand-in for logits and sampling: FNV-1a of its normalised row and
//     its request's seed, modulo the output vocabulary (tokenizer.go).
//     A chunk that leaves part of its prompt for later gets a token too,
//     which the scheduler drops (serving.BatchSeq.Sample).
//
// A real model replaces steps 3–5 with its layers (attention reading the
// KV cache through block_tables and writing the new token's K and V at
// slot_mapping, the MLP, the LM head into logits, sampling), launched the
// same way through dev.Launch on the arena's buffers. The next token is a
// function of the token and its position only, so outputs are
// reproducible whatever the batch, and a preempted sequence recomputed
// gives the same tokens.
type stepModel struct {
	norm      device.Function
	weight    device.DevicePtr
	offset    bool
	eps       float32
	cols      int64
	blockSize int
	meta      arena.DecodeMetaLayout
	maxRows   int   // rows of hidden_states
	maxIDs    int64 // entries of token_ids
	hs, out   device.DevicePtr
	scratch   device.DevicePtr
	tokenIDs  device.DevicePtr
	// host staging, reused step after step (steps run one at a time)
	pos, slots, ids, rows, back []byte
	hash                        hash.Hash64
	// outs holds the sampled tokens of the last two forwards: the
	// engine commits one step's while the next forward runs, which reads
	// them for its PendingTokens; turn is the one the next forward writes.
	outs [2][]int32
	turn int
	prev int // how many tokens the last forward sampled
}

// newStepModel lays the stand-in out on the built arena a; norm is the
// loaded rmsnorm_bf16, weight the input_layernorm weight (0: use
// norm_unit_w as an offset-from-1 weight).
func newStepModel(a *device.Arena, cfg *arena.ModelConfig, norm device.Function, weight device.DevicePtr, offset bool, eps float32) (*stepModel, error) {
	p := a.Plan
	m := &stepModel{norm: norm, weight: weight, offset: offset, eps: eps, cols: cfg.HiddenSize,
		blockSize: int(p.Options.KVBlockSize), meta: p.DecodeMeta,
		hs: a.Ptr(arena.HiddenStates), out: a.Ptr(arena.NormOutput), scratch: a.Ptr(arena.Scratch), tokenIDs: a.Ptr(arena.TokenIDs)}
	if weight == 0 {
		m.weight, m.offset = a.Ptr(arena.NormUnitW), true
		if a.Bytes(arena.NormUnitW) < 2*m.cols {
			return nil, fmt.Errorf("server: norm_unit_w holds %d B, fewer than hidden_size %d BF16 values", a.Bytes(arena.NormUnitW), m.cols)
		}
	}
	m.maxRows = int(a.Bytes(arena.HiddenStates) / (2 * m.cols))
	m.maxIDs = a.Bytes(arena.TokenIDs) / 4
	if m.maxRows < int(p.Options.MaxBatchSize) || m.hs == 0 || m.out == 0 || m.scratch == 0 || m.tokenIDs == 0 {
		return nil, fmt.Errorf("server: the arena has %d hidden_states rows for max_batch_size %d", m.maxRows, p.Options.MaxBatchSize)
	}
	m.pos, m.slots = make([]byte, m.meta.Positions.Bytes), make([]byte, m.meta.SlotMapping.Bytes)
	m.ids = make([]byte, a.Bytes(arena.TokenIDs))
	m.rows, m.back = make([]byte, int64(m.maxRows)*2*m.cols), make([]byte, int64(m.maxRows)*2*m.cols)
	m.outs, m.hash = [2][]int32{make([]int32, m.maxRows), make([]int32, m.maxRows)}, fnv.New64a()
	return m, nil
}

// forward runs one step of batch b on dev (see stepModel): tables is the
// batch's block tables as the KV step encoded them, seeds each sequence's
// sampling seed. Forwards run one at a time, in the order they were
// scheduled. It returns the next token of each sequence, in a slice the
// forward after next reuses. Errors: a batch of more rows or tokens than
// the arena holds, or a PendingToken without a row in the previous
// forward's output (scheduler bugs), and the device's.
func (m *stepModel) forward(dev device.Device, b serving.Batch, tables []byte, seeds []uint64) ([]int32, error) {
	n := len(b.Seqs)
	if rows := min(m.maxRows, int(m.meta.Rows)); n > rows || int64(b.Tokens) > m.maxIDs {
		return nil, fmt.Errorf("forward: a batch of %d sequences and %d tokens; the arena holds %d rows and %d token ids", n, b.Tokens, rows, m.maxIDs)
	}
	prev := m.outs[m.turn^1][:m.prev]
	width := int(m.meta.BlockTableWidth)
	nIDs := 0
	clear(m.pos)
	clear(m.slots)
	for r, s := range b.Seqs {
		last := s.Pos + len(s.Tokens) - 1
		block := int32(binary.LittleEndian.Uint32(tables[4*(r*width+last/m.blockSize):]))
		binary.LittleEndian.PutUint32(m.pos[4*r:], uint32(last))
		binary.LittleEndian.PutUint32(m.slots[4*r:], uint32(int(block)*m.blockSize+last%m.blockSize))
		tok := int32(0)
		for _, t := range s.Tokens {
			if t == serving.PendingToken {
				if s.PrevRow < 0 || s.PrevRow >= len(prev) {
					return nil, fmt.Errorf("forward: row %d decodes the token of row %d of the previous step, which sampled %d", r, s.PrevRow, len(prev))
				}
				t = prev[s.PrevRow]
			}
			binary.LittleEndian.PutUint32(m.ids[4*nIDs:], uint32(t))
			nIDs++
			tok = t
		}
		embed(m.rows[int64(r)*2*m.cols:int64(r+1)*2*m.cols], tok, last)
	}
	rowBytes := int64(n) * 2 * m.cols
	for _, c := range []struct {
		at  device.DevicePtr
		src []byte
	}{
		{m.scratch + device.DevicePtr(m.meta.Positions.Offset), m.pos},
		{m.scratch + device.DevicePtr(m.meta.SlotMapping.Offset), m.slots},
		{m.scratch + device.DevicePtr(m.meta.BlockTables.Offset), tables},
		{m.tokenIDs, m.ids[:4*max(nIDs, 1)]},
		{m.hs, m.rows[:rowBytes]},
	} {
		if err := dev.CopyHtoD(c.at, c.src); err != nil {
			return nil, fmt.Errorf("forward: %w", err)
		}
	}
	lc, args := kernels.RMSNormLaunch(m.out, m.hs, m.weight, uint32(n), uint32(m.cols), m.eps, m.offset)
	if err := dev.Launch(m.norm, lc, args...); err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	if err := dev.CopyDtoH(m.back[:rowBytes], m.out); err != nil {
		return nil, fmt.Errorf("forward: read norm_output: %w", err)
	}
	next, h := m.outs[m.turn][:n], m.hash
	m.turn, m.prev = m.turn^1, n
	for r := range n {
		h.Reset()
		h.Write(m.back[int64(r)*2*m.cols : int64(r+1)*2*m.cols])
		var s [8]byte
		binary.LittleEndian.PutUint64(s[:], seeds[r])
		h.Write(s[:])
		next[r] = wordBase + int32(h.Sum64()%uint64(len(words)))
	}
	return next, nil
}

// embed writes the stand-in embedding of token at position pos into row,
// BF16 little-endian: values in [−3, 3] that depend on both.
func embed(row []byte, token int32, pos int) {
	for i := 0; i < len(row)/2; i++ {
		v := float32((int(token)*31+pos*7+i*13)%97-48) / 16
		binary.LittleEndian.PutUint16(row[2*i:], kernels.F32ToBF16(v))
	}
}
