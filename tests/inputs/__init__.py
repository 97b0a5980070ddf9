"""Input hunting (issue 17): generators of valid and invalid inputs, and the tests that
feed them to the readers. `specgen` is imported by the API-server tests too."""
