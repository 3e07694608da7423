package node

import (
	"context"
	"fmt"

	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// memInfo answers a MemInfoRequest: for device dev, or every device when
// dev < 0, the driver's free and total bytes (Manager.MemInfo), the
// budget (Manager.Budget) and the ledger's current bytes. Errors:
// ErrUnknownDevice, and the device's own (gpuarena.ErrClosed).
func (g *gateway) memInfo(ctx context.Context, dev int32) *nodepb.MemInfoResponse {
	first, end := dev, dev+1
	if dev < 0 {
		first, end = 0, int32(g.group.Ranks())
	}
	out := &nodepb.MemInfoResponse{}
	for d := first; d < end; d++ {
		mgr, err := g.rank(d)
		if err != nil {
			return &nodepb.MemInfoResponse{Error: wireError(fmt.Errorf("meminfo: %w", err))}
		}
		free, total, err := mgr.MemInfo(ctx)
		if err != nil {
			return &nodepb.MemInfoResponse{Error: wireError(fmt.Errorf("meminfo of device %d: %w", d, err))}
		}
		led, err := mgr.Ledger(ctx)
		if err != nil {
			return &nodepb.MemInfoResponse{Error: wireError(fmt.Errorf("meminfo of device %d: %w", d, err))}
		}
		out.Devices = append(out.Devices, &nodepb.DeviceMemInfo{Device: d, FreeBytes: free, TotalBytes: total,
			BudgetBytes: mgr.Budget(), LedgerBytes: led.Counters.CurrentBytes})
	}
	return out
}
