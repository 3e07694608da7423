package main

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpuarena/gpuarena/device"
)

// chromium is the path of a Chromium (or Chrome) binary, "" when none is
// installed.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// drawnRegion is a region as the browser drew it.
type drawnRegion struct {
	Name  string  `json:"name"`
	Bytes int64   `json:"bytes,string"`
	Width float64 `json:"width"`
}

// The memory page, loaded in headless Chromium while a stream holds KV
// blocks, draws every region to scale (its width over the bar's is its
// bytes over the device's total, within a pixel) and its bytes are the
// ledger's: the arena's and the KV cache's owners to the byte. A
// screenshot is saved in the test's temporary folder.
func TestMemoryPageInBrowser(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("no Chromium binary (chromium, chromium-browser, google-chrome, headless-shell) on PATH; apt-get install chromium")
	}
	ts := startTestServer(t, 4000)
	var warm completion
	ts.postJSON(t, "/v1/completions", `{"prompt": "warm the prefix cache with a prompt of more than sixteen tokens", "max_tokens": 4}`, &warm)
	// Four clients keep streams running, each sending the next as soon as
	// one ends, until the page is read: KV blocks are in use whenever the
	// page draws, however long Chromium takes to start.
	ctx, cancel := context.WithCancel(context.Background())
	var holders sync.WaitGroup
	defer func() {
		cancel()
		holders.Wait()
	}()
	started := make(chan struct{}, 4)
	for range 4 {
		holders.Go(func() {
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/completions",
					jsonBody(`{"prompt": "hold some blocks while the page draws", "max_tokens": 400, "n": 8, "stream": true}`))
				if err != nil {
					return
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				select {
				case started <- struct{}{}:
				default:
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no stream started in 30 s")
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(bctx, chromedp.Navigate(ts.url+"/debug/memory"), chromedp.WaitVisible("#memory-bar")); err != nil {
		t.Fatal(err)
	}
	drawn, err := chromedp.Run(bctx, chromedp.Evaluate[[]drawnRegion](
		`Array.from(document.querySelectorAll("#memory-bar rect.region")).map(r => ({name: r.dataset.region, bytes: r.dataset.bytes, width: r.getBoundingClientRect().width}))`))
	if err != nil {
		t.Fatal(err)
	}
	barWidthPx, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`document.getElementById("memory-bar").clientWidth`))
	if err != nil {
		t.Fatal(err)
	}
	total, err := chromedp.Run(bctx, chromedp.Evaluate[int64](`Number(document.getElementById("memory-bar").dataset.total)`))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(90))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "memory.png")
	if err := os.WriteFile(path, shot, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d B); bar %.0f px", path, len(shot), barWidthPx)
	cancel() // the streams end; their blocks are freed
	holders.Wait()

	l := ledgerOf(t, ts)
	bytes := map[string]int64{}
	var sum int64
	for _, r := range drawn {
		want := barWidthPx * float64(r.Bytes) / float64(total)
		if math.Abs(r.Width-want) > 1 {
			t.Errorf("region %s: %.2f px for %d B of %d on %.0f px; want %.2f", r.Name, r.Width, r.Bytes, total, barWidthPx, want)
		}
		bytes[r.Name] = r.Bytes
		sum += r.Bytes
	}
	if sum != total || len(drawn) < 4 {
		t.Fatalf("regions %+v sum to %d B of %d", drawn, sum, total)
	}
	if got, want := bytes["arena"], l.Owners[device.ArenaOwner].CurrentBytes; got != want || got == 0 {
		t.Errorf("arena drawn %d B, the ledger holds %d", got, want)
	}
	if got, want := bytes["kv_used"]+bytes["kv_cached"]+bytes["kv_free"], l.Owners[device.KVCacheOwner].CurrentBytes; got != want || bytes["kv_used"] == 0 {
		t.Errorf("KV cache drawn %d B (used %d), the ledger holds %d", got, bytes["kv_used"], want)
	}
}

// ledgerOf reads /debug/ledger.
func ledgerOf(t *testing.T, ts *testServer) device.Ledger {
	t.Helper()
	resp, err := http.Get(ts.url + "/debug/ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l device.Ledger
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l
}
