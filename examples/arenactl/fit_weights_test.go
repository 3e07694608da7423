package main

import (
	"strings"
	"testing"
)

// gpt-oss-120b at 131k context on an H100: sized as vLLM's Marlin kernels
// hold it (the default) it does not fit, as vLLM ran out of memory there;
// sized as the checkpoint stores it, it would; the backend picks the
// padding, and an unknown one is refused.
func TestFitWeightsLayoutFlags(t *testing.T) {
	args := []string{"fit", "--config", configPath("gpt-oss-120b"), "--device", "h100-80gb", "--max-seq-len", "131072"}
	if r := cli(t, args...); r.code != exitNegative || !strings.Contains(r.stdout, "70756592256 B") {
		t.Fatalf("engine layout: exit %d, want does not fit with 70756592256 B of weights:\n%s", r.code, r.stdout)
	}
	if r := cli(t, append(args, "--weights-layout", "checkpoint")...); r.code != exitOK || !strings.Contains(r.stdout, "65248815744 B") {
		t.Fatalf("checkpoint layout: exit %d, want fits with 65248815744 B:\n%s", r.code, r.stdout)
	}
	if r := cli(t, append(args, "--mxfp4-backend", "flashinfer_trtllm")...); !strings.Contains(r.stdout, "73646729856 B") {
		t.Fatalf("trtllm padding: want 73646729856 B of weights:\n%s", r.stdout)
	}
	for _, bad := range [][]string{{"--mxfp4-backend", "bogus"}, {"--weights-layout", "raw"}} {
		if r := cli(t, append(args, bad...)...); r.code != exitFailure || !strings.Contains(r.stderr, bad[0]) {
			t.Fatalf("%v: exit %d, stderr %q; want an error naming the flag", bad, r.code, r.stderr)
		}
	}
}
