import sys
from pathlib import Path

# import_graph.py is a script beside these tests.
sys.path.insert(0, str(Path(__file__).parent))
