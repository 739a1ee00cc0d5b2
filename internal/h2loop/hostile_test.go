package h2loop

import (
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestClientHeaderTableSize: the answers' header blocks keep to the
// dynamic table size the client's SETTINGS_HEADER_TABLE_SIZE allows, at
// the start and when it shrinks it mid-connection (a client whose decoder
// holds no table can read them), and a huge size grows nothing.
func TestClientHeaderTableSize(t *testing.T) {
	for _, size := range []uint32{0, 100, 1 << 30} {
		h := newHarness(t, Config{}, http2.Setting{ID: http2.SettingHeaderTableSize, Val: size})
		h.dec.SetMaxDynamicTableSize(min(size, 4096))
		h.dec.SetAllowedMaxDynamicTableSize(min(size, 4096))
		fields := []hpack.HeaderField{{Name: "x-a", Value: "a value kept in a table"}, {Name: "x-b", Value: string(make([]byte, 50))}}
		h.onServe = func(s *Stream) { h.c.Respond(s, 200, fields, nil) }
		id := uint32(1)
		answer := func() {
			t.Helper()
			h.headers(id, h.get("/"), true)
			id += 2
			if got := h.feed(); len(got) != 1 || field(got[0].fields, "x-a") != fields[0].Value {
				t.Fatalf("table size %d: %+v", size, got)
			}
		}
		for range 3 {
			answer()
		}
		_ = h.fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
		h.feed()
		h.dec.SetAllowedMaxDynamicTableSize(0)
		answer()
		h.dec.SetMaxDynamicTableSize(0)
		answer()
	}
}

// TestProvokedResetsOfTakenStreams counts the streams taken before their
// body (see StreamHandler) that the server resets for the client's fault
// (MadeYouReset, CVE-2025-8671) as TestProvokedResets counts the others,
// for each frame that provokes one: each cancels its handler, and past
// MaxResets the connection ends.
func TestProvokedResetsOfTakenStreams(t *testing.T) {
	for name, provoke := range map[string]func(h *harness, id uint32){
		"window increment 0": func(h *harness, id uint32) { _ = h.fr.WriteWindowUpdate(id, 0) },
		"window overflow":    func(h *harness, id uint32) { _ = h.fr.WriteWindowUpdate(id, 1<<31-1) },
		"DATA past the window": func(h *harness, id uint32) {
			for range 5 {
				_ = h.fr.WriteData(id, false, make([]byte, 16384))
			}
		},
		"DATA short of content-length": func(h *harness, id uint32) { _ = h.fr.WriteData(id, true, make([]byte, 3)) },
		"trailers without END_STREAM": func(h *harness, id uint32) {
			_ = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block("x-t", "1"), EndHeaders: true})
		},
		"DATA after the end": func(h *harness, id uint32) {
			_ = h.fr.WriteData(id, true, make([]byte, 10))
			_ = h.fr.WriteData(id, true, nil)
		},
		"self-dependency": func(h *harness, id uint32) { _ = h.fr.WritePriority(id, http2.PriorityParam{StreamDep: id}) },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Config{MaxResets: 10})
			h.fr.AllowIllegalWrites = true
			h.onOpen = func(*Stream) bool { return true }
			id := uint32(1)
			for i := range 11 {
				h.headers(id, h.post("/", "content-length", "10"), false)
				h.feed()
				provoke(h, id)
				got := h.feed()
				if len(h.cancelled) != i+1 {
					t.Fatalf("stream %d not cancelled: sent %+v", id, got)
				}
				if i == 10 {
					goAway(t, h, got, http2.ErrCodeEnhanceYourCalm)
				}
				id += 2
			}
		})
	}
}
