"""Tests of the PyTorch face (dataloader/torch/) against torch.utils.data; skipped without torch."""
