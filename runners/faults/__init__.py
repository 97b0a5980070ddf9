"""Injected miscompilations: HLO pass plugins that prove the oracle catches real fault classes."""
