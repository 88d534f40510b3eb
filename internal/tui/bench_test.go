package tui

import (
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

func benchModel(b *testing.B, n int) *Model {
	b.Helper()
	src := newFake(Features{Throttle: true})
	m := New(src, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 60})
	m.Update(snapshotMsg{manyTenants(n)})
	return m
}

// BenchmarkView renders the Tenants view with 10,000 tenants tracked; the
// budget is one frame (16 ms) with modest allocation.
func BenchmarkView(b *testing.B) {
	m := benchModel(b, 10_000)
	press(m, "down", "down") // scrolled a little, as during an incident
	b.ReportAllocs()
	for b.Loop() {
		_ = m.View()
	}
}

// BenchmarkViewDrillIn renders the drill-in of one tenant among 10,000.
func BenchmarkViewDrillIn(b *testing.B) {
	m := benchModel(b, 10_000)
	press(m, "enter")
	b.ReportAllocs()
	for b.Loop() {
		_ = m.View()
	}
}

// BenchmarkSnapshot takes a snapshot of 10,000 tenants (sort, filter,
// keep the selection): the work done once a second in Update.
func BenchmarkSnapshot(b *testing.B) {
	m := benchModel(b, 10_000)
	s := manyTenants(10_000)
	b.ReportAllocs()
	for b.Loop() {
		m.Update(snapshotMsg{s})
	}
}
