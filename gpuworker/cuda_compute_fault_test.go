//go:build cuda

package gpuworker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// faultPTX is a kernel that stores to the address it is given: launched
// with a pointer no allocation holds, it faults the context
// (CUDA_ERROR_ILLEGAL_ADDRESS). Hand-written PTX, not generated.
const faultPTX = `.version 7.0
.target sm_80
.address_size 64

.visible .entry store_to(
	.param .u64 store_to_param_0
)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [store_to_param_0];
	mov.u32 %r1, 42;
	st.global.u32 [%rd1], %r1;
	ret;
}
`

// faultChildEnv selects the child role of TestCUDAKernelFault.
const faultChildEnv = "GPUARENA_FAULT_CHILD"

// TestCUDAKernelFault runs a kernel that writes to an illegal address, in
// a child process (this test binary again, with faultChildEnv set): a
// faulted context is unusable for the rest of the process, so the other
// tests must not share it. The parent checks that the child exited 0 and
// printed every step of the check:
//
//   - the step gets ErrDeviceFault (found when the step's end waits for
//     its stream);
//   - Worker.Err reports it;
//   - every later request (alloc, memset, module load, forward) gets it;
//   - Stop returns within a minute.
func TestCUDAKernelFault(t *testing.T) {
	if os.Getenv(faultChildEnv) == "1" {
		kernelFaultChild(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestCUDAKernelFault$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), faultChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child output:\n%s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	for _, want := range []string{"FAULT step:", "FAULT err:", "FAULT alloc:", "FAULT memset:", "FAULT load:", "FAULT forward:", "FAULT stopped in", "--- PASS: TestCUDAKernelFault"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the child's output lacks %q", want)
		}
	}
}

func kernelFaultChild(t *testing.T) {
	ctx := context.Background()
	w, err := gpuworker.Start(newSystem(t), gpuworker.BackendConfig{Kind: gpuworker.KindCUDA}.Factory(), gpuworker.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	m := mustLoad(t, w, "fault", []byte(faultPTX))
	store := mustFunction(t, m, "store_to")
	p := mustAlloc(t, w, "fault", 4096)
	_, err = w.Forward(ctx, func(dev device.Device) error {
		return dev.Launch(store, device.LaunchConfig{Grid: device.Dim3{X: 1}, Block: device.Dim3{X: 1}}, device.PtrArg(16))
	})
	check := func(what string, err error) {
		fmt.Printf("FAULT %s: %v\n", what, err)
		if !errors.Is(err, gpuworker.ErrDeviceFault) {
			t.Errorf("%s: got %v, want ErrDeviceFault", what, err)
		}
	}
	check("step", err)
	check("err", w.Err())
	_, err = w.Alloc(ctx, "fault", "after", 4096)
	check("alloc", err)
	check("memset", w.Memset(ctx, p, 0, 16))
	_, err = w.LoadModule(ctx, "again", []byte(faultPTX))
	check("load", err)
	_, err = w.Forward(ctx, func(device.Device) error { return nil })
	check("forward", err)
	start := time.Now()
	stopped := make(chan struct{})
	go func() { w.Stop(); close(stopped) }()
	select {
	case <-stopped:
		fmt.Printf("FAULT stopped in %v\n", time.Since(start))
	case <-time.After(time.Minute):
		t.Fatal("Stop did not return within a minute after a device fault")
	}
}
