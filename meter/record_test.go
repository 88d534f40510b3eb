package meter
