package gpuworker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// The error's advice fits what was asked: an embedder's own allocation is
// told the bytes asked and the budget left and to free its own allocations,
// never to lower max_batch_tokens; the arena is told what shrinks it; and
// so on for every owner the manager keeps.
func TestOutOfMemoryAdviceFitsTheRequest(t *testing.T) {
	base := gpuworker.OutOfMemoryError{
		Bytes: 30 << 20, DeviceTotal: 1 << 30, DeviceFree: 900 << 20, Budget: 50 << 20, OverBudget: true,
		HeldByOwner: map[string]int64{device.UserOwner: 20 << 20, device.ArenaOwner: 10 << 20}, ShortfallBytes: 10 << 20,
	}
	for _, c := range []struct {
		owner, label string
		want, never  []string
	}{
		{device.UserOwner, "workspace",
			[]string{"asked 30.00 MiB", "20.00 MiB of this process's budget of 50.00 MiB left", "free your own allocations", "gpu_memory_utilization"},
			[]string{"max_batch_tokens", "fp8_rowwise"}},
		{"cublas", "workspace",
			[]string{`FreeOwner("cublas")`, "free your own allocations", "KV cache with fewer blocks"},
			[]string{"max_batch_tokens"}},
		{device.ArenaOwner, "arena pool",
			[]string{"lower max_batch_tokens", "logits_rows sampled", "raise gpu_memory_utilization"},
			[]string{"free your own allocations"}},
		{device.SlabOwner("ssm_rowwise_w_bf16"), "ssm_rowwise_w_bf16",
			[]string{"fp8_rowwise"}, []string{"max_batch_tokens"}},
		{device.WeightsOwner, "weights (3 tensors)",
			[]string{"tensor_parallel_size", "raise gpu_memory_utilization"}, []string{"max_batch_tokens"}},
		{device.KVCacheOwner, "kv_full_attention",
			[]string{"fewer blocks"}, []string{"max_batch_tokens or max_seq_len"}},
	} {
		e := base
		e.Owner, e.Label = c.owner, c.label
		msg := e.Error()
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("owner %q: %q lacks %q", c.owner, msg, w)
			}
		}
		for _, n := range c.never {
			if strings.Contains(msg, n) {
				t.Errorf("owner %q: %q suggests %q", c.owner, msg, n)
			}
		}
	}
	// The device, not the budget, refused: memory others hold is named.
	e := base
	e.Owner, e.Label, e.OverBudget, e.DeviceFree, e.ShortfallBytes = device.UserOwner, "workspace", false, 10<<20, 20<<20
	if msg := e.Error(); !strings.Contains(msg, "the device itself") || !strings.Contains(msg, "other processes") {
		t.Errorf("device refusal: %q does not say the device refused and others hold memory", msg)
	}
}

// The error names the device that ran out, ordinal and name, so a user of
// several devices knows which without unwrapping a rank's error.
func TestOutOfMemoryNamesTheDevice(t *testing.T) {
	mc, err := gpuworker.ParseMachine("2xh200")
	if err != nil {
		t.Fatal(err)
	}
	machine, err := gpuworker.NewHostSimMachine(mc)
	if err != nil {
		t.Fatal(err)
	}
	w := startWith(t, machine.Factories()[1])
	_, err = w.Alloc(context.Background(), device.UserOwner, "too_big", 200<<30)
	var oom *gpuworker.OutOfMemoryError
	if !errors.As(err, &oom) || !errors.Is(err, gpuworker.ErrOutOfMemory) {
		t.Fatalf("Alloc of 200 GiB on an H200: %v, want an *OutOfMemoryError", err)
	}
	if oom.Device != 1 || oom.DeviceName != "hostsim NVIDIA H200" {
		t.Fatalf("Device %d, DeviceName %q; want 1, %q", oom.Device, oom.DeviceName, "hostsim NVIDIA H200")
	}
	if !strings.Contains(err.Error(), "on device 1 (hostsim NVIDIA H200)") {
		t.Fatalf("%q does not name device 1", err)
	}
}
