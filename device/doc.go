// Package device is what an embedder of gpuarena sees of a device: its
// pointers (DevicePtr), a forward step's handle (Device), a built arena
// (Arena, its Slabs and Layout), the ledger of its allocations (Ledger), how
// the GPU worker has run (Stats) and what a release freed (ReleaseReport).
//
// These are plain values: the module root (package gpuarena) and package
// gpuworker return them, and nothing here talks to the device. The messages
// the actors behind the manager send each other are not part of the public
// API.
//
// Sizes are in bytes throughout; a DevicePtr is a device address, 0 meaning
// NULL.
package device
