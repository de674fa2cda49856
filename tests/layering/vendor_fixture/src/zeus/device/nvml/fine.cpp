// Inside device/: the backend itself may name its library.
int nvmlInit();
