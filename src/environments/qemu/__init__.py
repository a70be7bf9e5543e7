"""OSWorld's VM image (or any image whose server speaks its protocol) under QEMU."""
