! A bf16 sum made in Fortran (`use mpi`): elements of MPI_Type_contiguous(2, MPI_BYTE) and an op
! of MPI_Op_create over a Fortran subroutine that widens to REAL, adds and rounds to nearest, as a
! Fortran job summing 16-bit gradients would make it (gfortran has no 16-bit REAL: the elements
! are INTEGER(2) bit patterns). The library must recognise the op through its Fortran binding and
! serve MPI_Allreduce (not in place, in place) and MPI_Reduce_scatter_block with it; a bf16 max
! made the same way must pass through. Integer values, exact in bf16 and in any order, checked
! against the sums and maxima computed here. Interception is checked from outside, through the
! OPTIREDUCE_REPORT file (3 calls served as bfloat16 per rank, the max passed through as not a sum).
module bf16_ops
  implicit none
contains
  real function widen(h)
    integer(2), intent(in) :: h
    widen = transfer(ishft(int(h, 4), 16), 0.0)
  end function widen

  ! Nearest, ties to even, on the float32 bits (no NaN reaches it here).
  integer(2) function narrow(x)
    real, intent(in) :: x
    integer(8) :: u
    u = iand(int(transfer(x, 0_4), 8), 4294967295_8)
    u = ishft(u + 32767_8 + iand(ishft(u, -16), 1_8), -16)
    if (u >= 32768_8) u = u - 65536_8
    narrow = int(u, 2)
  end function narrow

  subroutine bf16_sum(invec, inoutvec, len, datatype)
    integer, intent(in) :: len, datatype
    integer(2), intent(in) :: invec(len)
    integer(2), intent(inout) :: inoutvec(len)
    integer :: i
    do i = 1, len
      inoutvec(i) = narrow(widen(invec(i)) + widen(inoutvec(i)))
    end do
    if (.false.) print *, datatype
  end subroutine bf16_sum

  subroutine bf16_max(invec, inoutvec, len, datatype)
    integer, intent(in) :: len, datatype
    integer(2), intent(in) :: invec(len)
    integer(2), intent(inout) :: inoutvec(len)
    integer :: i
    do i = 1, len
      inoutvec(i) = narrow(max(widen(invec(i)), widen(inoutvec(i))))
    end do
    if (.false.) print *, datatype
  end subroutine bf16_max
end module bf16_ops

program half_op_check
  use mpi
  use bf16_ops
  implicit none
  integer, parameter :: block = 40009
  integer(2), allocatable :: send(:), recv(:)
  integer :: ierr, rank, nranks, n, two_bytes, sum_op, max_op, failures

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  n = block * nranks
  allocate(send(n), recv(n))
  call MPI_Type_contiguous(2, MPI_BYTE, two_bytes, ierr)
  call MPI_Type_commit(two_bytes, ierr)
  call MPI_Op_create(bf16_sum, .true., sum_op, ierr)
  call MPI_Op_create(bf16_max, .true., max_op, ierr)
  failures = 0

  call fill(send, rank)
  recv = -1
  call MPI_Allreduce(send, recv, n, two_bytes, sum_op, MPI_COMM_WORLD, ierr)
  call expect(recv, n, 0, .false., 'MPI_Allreduce, Fortran bf16 sum')

  call fill(recv, rank)
  call MPI_Allreduce(MPI_IN_PLACE, recv, n, two_bytes, sum_op, MPI_COMM_WORLD, ierr)
  call expect(recv, n, 0, .false., 'MPI_Allreduce, Fortran bf16 sum, MPI_IN_PLACE')

  recv = -1
  call MPI_Reduce_scatter_block(send, recv, block, two_bytes, sum_op, MPI_COMM_WORLD, ierr)
  call expect(recv, block, block * rank, .false., 'MPI_Reduce_scatter_block, Fortran bf16 sum')

  recv = -1
  call MPI_Allreduce(send, recv, n, two_bytes, max_op, MPI_COMM_WORLD, ierr)
  call expect(recv, n, 0, .true., 'MPI_Allreduce, Fortran bf16 max (passed through)')

  call MPI_Op_free(sum_op, ierr)
  call MPI_Op_free(max_op, ierr)
  call MPI_Type_free(two_bytes, ierr)
  call MPI_Allreduce(MPI_IN_PLACE, failures, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (failures /= 0) then
    if (rank == 0) print '(a, i0, a)', 'half_op: FAIL (', failures, ' wrong calls)'
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  if (rank == 0) print '(a, i0, a)', 'half_op: PASS on ', nranks, ' ranks'
  call MPI_Finalize(ierr)

contains

  ! Rank r's element i: an integer in -30 .. 30.
  real function value_of(r, i)
    integer, intent(in) :: r, i
    value_of = real(mod(i * 7 + r * 13, 61) - 30)
  end function value_of

  subroutine fill(buf, r)
    integer(2), intent(out) :: buf(:)
    integer, intent(in) :: r
    integer :: i
    do i = 1, size(buf)
      buf(i) = narrow(value_of(r, i))
    end do
  end subroutine fill

  ! got(i) is element first + i of the result: the sum (or the maximum) over ranks.
  subroutine expect(got, count, first, maximum, what)
    integer(2), intent(in) :: got(:)
    integer, intent(in) :: count, first
    logical, intent(in) :: maximum
    character(len=*), intent(in) :: what
    integer :: i, r
    real :: want
    do i = 1, count
      want = value_of(0, first + i)
      do r = 1, nranks - 1
        if (maximum) then
          want = max(want, value_of(r, first + i))
        else
          want = want + value_of(r, first + i)
        end if
      end do
      if (widen(got(i)) /= want) then
        print '(a, i0, a, a, a, i0, a, f10.1, a, f10.1)', 'rank ', rank, ': ', what, ': element ', first + i, &
          ' is ', widen(got(i)), ', expected ', want
        failures = failures + 1
        return
      end if
    end do
  end subroutine expect
end program half_op_check
