"""Fixed helper programs the desktop compilers prepend to actions that need them.

They hold no model data: text reaches them only as `repr` literals in the calls that
follow. They run inside the desktop, like every compiled action.
"""

from __future__ import annotations

__all__ = ["WINDOWS_CLIPBOARD", "X11_TYPE_UNICODE"]

#: `type_unicode(text)`: types any Unicode characters through XTest on X11.
#: A character that sits unshifted on some key is typed with that key as mapped (so `<`
#: needs no keymap change); printable ASCII and Latin-1 use their own keysyms, the rest
#: Unicode keysyms. pyautogui drops characters its keymap lacks, and `xdotool type` borrows
#: one spare keycode per character and hands it back milliseconds later, so a busy
#: application that reads the keymap late types the wrong or no character. Here each
#: character gets a keycode of its own that stays mapped (later calls reuse it); a keycode
#: is recycled only when the spare ones run out, and then only after a pause.
X11_TYPE_UNICODE = """
def type_unicode(text, delay=0.012):
    import time
    from Xlib import X, display as xdisplay
    from Xlib.ext import xtest
    d = xdisplay.Display()
    try:
        first = d.display.info.min_keycode
        table = d.get_keyboard_mapping(first, d.display.info.max_keycode - first + 1)
        known, spare, ours, used = {}, [], [], []
        for i, syms in enumerate(table):
            code = first + i
            if not any(syms):
                spare.append(code)
                continue
            if syms[0] == syms[1] and syms[0] >= 0xA0 and not any(syms[2:]):
                ours.append(code)
            if syms[0]:
                known.setdefault(syms[0], code)
        for ch in text:
            point = ord(ch)
            sym = point if 0x20 <= point <= 0x7E or 0xA0 <= point <= 0xFF else 0x01000000 | point
            code = known.get(sym)
            if code is None:
                if spare:
                    code = spare.pop()
                elif ours:
                    code = ours.pop(0)
                else:
                    time.sleep(0.3)
                    code = used.pop(0)
                for old in [s for s, c in known.items() if c == code]:
                    del known[old]
                d.change_keyboard_mapping(code, [(sym, sym)])
                d.sync()
                time.sleep(0.05)
                known[sym] = code
            if code in used:
                used.remove(code)
            used.append(code)
            xtest.fake_input(d, X.KeyPress, code)
            d.sync()
            time.sleep(delay / 2)
            xtest.fake_input(d, X.KeyRelease, code)
            d.sync()
            time.sleep(delay / 2)
    finally:
        d.close()
"""

#: `set_clipboard(text)`: puts text on the Windows clipboard as CF_UNICODETEXT (Win32 API).
WINDOWS_CLIPBOARD = """
def set_clipboard(text):
    import ctypes
    from ctypes import wintypes
    k32, u32 = ctypes.windll.kernel32, ctypes.windll.user32
    k32.GlobalAlloc.restype = wintypes.HGLOBAL
    k32.GlobalAlloc.argtypes = [wintypes.UINT, ctypes.c_size_t]
    k32.GlobalLock.restype = wintypes.LPVOID
    k32.GlobalLock.argtypes = [wintypes.HGLOBAL]
    k32.GlobalUnlock.argtypes = [wintypes.HGLOBAL]
    u32.SetClipboardData.argtypes = [wintypes.UINT, wintypes.HANDLE]
    data = text.encode('utf-16-le') + b'\\x00\\x00'
    handle = k32.GlobalAlloc(0x0002, len(data))
    ctypes.memmove(k32.GlobalLock(handle), data, len(data))
    k32.GlobalUnlock(handle)
    for _ in range(10):
        if u32.OpenClipboard(None):
            break
        time.sleep(0.05)
    try:
        u32.EmptyClipboard()
        u32.SetClipboardData(13, handle)
    finally:
        u32.CloseClipboard()
"""
