package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// A cache of 16 blocks of 16 tokens holds 240 tokens (block 0 is the
// pool's null block): /v1/models says so, and a request for more is a 400
// naming the limit, not a wait that ends in a server error.
func TestRequestLimitIsTheCache(t *testing.T) {
	ts := startTestServer(t, 16)
	resp, err := http.Get(ts.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			MaxModelLen int `json:"max_model_len"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if err != nil || len(models.Data) != 1 || models.Data[0].MaxModelLen != 240 {
		t.Fatalf("/v1/models: %+v (%v), want max_model_len 240", models, err)
	}
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if code := ts.postJSON(t, "/v1/completions", `{"prompt": "a short prompt", "max_tokens": 400}`, &e); code != http.StatusBadRequest || !strings.Contains(e.Error.Message, "240") {
		t.Fatalf("400 tokens on a 240-token cache: status %d, %q; want 400 naming 240", code, e.Error.Message)
	}
}
