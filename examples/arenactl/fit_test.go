package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestFitJSONGolden(t *testing.T) {
	for _, model := range goldenModels {
		t.Run(model, func(t *testing.T) {
			r := cli(t, "fit", "--config", configPath(model), "--json").mustSucceed(t)
			golden(t, "fit-"+model+".golden", r.stdout)
		})
	}
}

func TestFitExitStatus(t *testing.T) {
	cfg := configPath("deepseek-v3")
	fits := cli(t, "fit", "--config", cfg, "--json").mustSucceed(t)
	var f fitJSON
	if err := json.Unmarshal([]byte(fits.stdout), &f); err != nil {
		t.Fatal(err)
	}
	if !f.Fits || f.HeadroomBytes <= 0 || f.KVBlocks <= 0 {
		t.Errorf("deepseek-v3 on an H200: fits %v, headroom %d, kv blocks %d; want it to fit with KV blocks left", f.Fits, f.HeadroomBytes, f.KVBlocks)
	}

	short := cli(t, "fit", "--config", cfg, "--device-memory", "8GiB", "--device-used", "1GB")
	if short.code != exitNegative {
		t.Fatalf("does not fit: exit %d, want %d; stderr:\n%s", short.code, exitNegative, short.stderr)
	}
	for _, want := range []string{"DOES NOT FIT", "shortfall", "largest buffers", "logits", "used by others  1000000000 B"} {
		if !strings.Contains(short.stdout, want) {
			t.Errorf("fit report lacks %q:\n%s", want, short.stdout)
		}
	}
	if !strings.Contains(short.stderr, "does not fit: short by") || strings.Count(short.stderr, "arenactl: ") != 1 {
		t.Errorf("stderr: want one line saying it does not fit, got:\n%s", short.stderr)
	}

	shortJSON := cli(t, "fit", "--config", cfg, "--device-memory", "8GiB", "--json")
	if shortJSON.code != exitNegative {
		t.Fatalf("--json, does not fit: exit %d, want %d", shortJSON.code, exitNegative)
	}
	if err := json.Unmarshal([]byte(shortJSON.stdout), &f); err != nil {
		t.Fatal(err)
	}
	if f.Fits || f.ShortfallBytes <= 0 || len(f.Largest) != 3 || f.Largest[0].Name != "logits" {
		t.Errorf("does not fit: got fits %v, shortfall %d, largest %+v", f.Fits, f.ShortfallBytes, f.Largest)
	}
}
