"""Generated protobuf code for skyqa.v1 (make proto). Do not edit."""
